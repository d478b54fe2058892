-- Every order enriched with its customer by the foreign key customer_id (KIP-213): the left
-- table's column against the right table's primary key. Twin of
-- pipelines/specs/orders_with_customer.yaml.
SET 'description' = 'Orders enriched with their customer by the foreign key customer_id (KIP-213, left join).';
SET 'order_updates.history_retention_ms' = INTERVAL '2' DAY;
SET 'customers.history_retention_ms' = INTERVAL '2' DAY;
SET 'start_date' = '2024-03-01';
SET 'backfill_horizon_days' = 2;

INSERT INTO orders_with_customer
SELECT *
FROM order_updates AS o
LEFT JOIN customers AS c ON o.customer_id = c.customer_id;

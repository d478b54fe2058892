-- The demo pipeline in SQL (its YAML twin: pipelines/specs/orders_with_rates.yaml): orders
-- enriched with the currency rate valid at each order's event time, a Flink event-time temporal
-- join. `orders` and `rates` are the `kind: source` files beside this one.
SET 'description' = 'Orders enriched with the currency rate valid at each order''s event time.';
SET 'rates.history_retention_ms' = INTERVAL '1' DAY;   -- how much rate history is kept (KIP-914)
SET 'grace_ms' = INTERVAL '30' MINUTE;                 -- orders wait for out-of-order rates (KIP-923)
SET 'late' = 'join';
SET 'start_date' = '2024-03-01';
SET 'backfill_horizon_days' = '2';
SET 'quarantine_threshold' = '0.05';

INSERT INTO orders_with_rates
SELECT *
FROM orders AS o
LEFT JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r
  ON o.currency = r.currency;

-- Customers joined with their accounts by primary key, both versioned changelogs whose updates
-- arrive out of order (a table-table join). Twin of pipelines/specs/customer_accounts.yaml.
SET 'description' = 'Customers joined with their accounts by customer id (both versioned, updates out of order).';
SET 'customers.versioned' = TRUE;
SET 'customers.history_retention_ms' = INTERVAL '2' DAY;
SET 'accounts.versioned' = TRUE;
SET 'accounts.history_retention_ms' = INTERVAL '2' DAY;
SET 'quarantine_expired' = TRUE;
SET 'start_date' = '2024-03-01';
SET 'backfill_horizon_days' = 2;

INSERT INTO customer_accounts
SELECT *
FROM customers AS c
JOIN accounts AS a ON c.customer_id = a.customer_id;

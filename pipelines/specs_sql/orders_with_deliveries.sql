-- Every order with the deliveries made within three hours after it (a left interval join, as
-- Hazelcast plans a stream-to-stream join from the time bounds of its ON clause). Twin of
-- pipelines/specs/orders_with_deliveries.yaml.
SET 'description' = 'Orders with the deliveries made within three hours after them (left interval join).';
SET 'orders.lag_ms' = INTERVAL '30' MINUTE;            -- each stream's watermark lag
SET 'deliveries.lag_ms' = INTERVAL '30' MINUTE;
SET 'late' = 'quarantine';
SET 'max_buffered_rows' = 100000;
SET 'start_date' = '2024-03-01';
SET 'backfill_horizon_days' = 2;
SET 'quarantine_threshold' = 0.05;

INSERT INTO orders_with_deliveries
SELECT *
FROM orders AS o
LEFT JOIN deliveries AS d
  ON d.ts BETWEEN o.ts AND o.ts + INTERVAL '3' HOUR
 AND d.order_id = o.order_id;

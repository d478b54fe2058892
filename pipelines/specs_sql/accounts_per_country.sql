-- On top of customer_accounts (another pipeline, read by name): how many customers with an
-- account per country, a count over the join's changelog. Twin of
-- pipelines/specs/accounts_per_country.yaml.
SET 'description' = 'Customers with an account, per country (a count over the customer_accounts join).';
SET 'upstream_key' = 'customer_id';
SET 'start_date' = '2024-03-01';

INSERT INTO accounts_per_country
SELECT left_country, COUNT(*)
FROM customer_accounts
GROUP BY left_country;

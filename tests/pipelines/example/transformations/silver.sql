-- paid orders with their customer's region: a filter and a join
CREATE MATERIALIZED VIEW silver_orders AS
SELECT o.order_id, o.customer_id, o.amount, o.qty, c.region
FROM bronze_orders o
JOIN bronze_customers c ON o.customer_id = c.customer_id
WHERE o.status = 'paid';

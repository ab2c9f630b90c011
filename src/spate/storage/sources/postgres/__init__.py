"""PostgreSQL change data capture over logical replication (pgoutput)."""

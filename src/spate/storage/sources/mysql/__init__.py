"""Change data capture from MariaDB: a consistent snapshot, then the row-based binlog."""

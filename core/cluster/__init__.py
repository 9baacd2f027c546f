"""The node across peers: units placed on hosts, code and files fetched by hash, migration, replication."""

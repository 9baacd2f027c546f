"""Who gave how much guest CPU to whom: a durable ledger and signed summaries a peer cannot inflate."""

"""Who gave how much guest CPU to whom: a durable ledger, signed summaries peers cannot inflate, usage for fair share."""

-- A stored answer is kept as the exact JSON text that was sent: a replay sends it as it is,
-- without parsing it from jsonb and serializing it again, and repeats the first answer byte
-- for byte. Records live 24 h, so the one-time table rewrite touches at most a day of rows.
-- migration-safety: access-exclusive: the rewrite holds the table for at most a day's worth of rows (the TTL)
alter table idempotency_records alter column response_body type text using response_body::text;

-- When the initiator's connect was made (SQLite; docs/schema.md): the thread that connected
-- was serving the request the connection was opened for at that moment.
ALTER TABLE connection ADD COLUMN t_connect INTEGER;

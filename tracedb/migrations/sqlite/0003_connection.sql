-- Connections (SQLite; docs/schema.md): merge works out every connection while matching
-- messages; this keeps it. A stream connection (TCP, unix stream) is one connect/accept pair;
-- a datagram "connection" is one pair of ports (or paths). direction: 'call' = initiator →
-- acceptor, 'return' = acceptor → initiator; ordinal: 0-based index of the message within its
-- connection and direction, in order of its start (send_t, else recv_t).
CREATE TABLE connection (
    session_id INTEGER NOT NULL,
    id INTEGER NOT NULL,
    proto TEXT NOT NULL,
    initiator_from TEXT NOT NULL,
    initiator_process_id INTEGER,
    initiator_thread_id INTEGER,
    acceptor_process_id INTEGER,
    acceptor_thread_id INTEGER,
    initiator_endpoint TEXT NOT NULL,
    acceptor_endpoint TEXT NOT NULL,
    t_first INTEGER,
    t_last INTEGER,
    call_messages INTEGER NOT NULL,
    call_bytes INTEGER NOT NULL,
    return_messages INTEGER NOT NULL,
    return_bytes INTEGER NOT NULL,
    PRIMARY KEY (session_id, id)
);
ALTER TABLE message ADD COLUMN connection_id INTEGER;
ALTER TABLE message ADD COLUMN direction TEXT;
ALTER TABLE message ADD COLUMN ordinal INTEGER;
CREATE INDEX message_by_connection ON message (session_id, connection_id, direction, ordinal);

-- Connections (PostgreSQL; docs/schema.md): merge works out every connection while matching
-- messages; this keeps it. A stream connection (TCP, unix stream) is one connect/accept pair;
-- a datagram "connection" is one pair of ports (or paths). direction: 'call' = initiator →
-- acceptor, 'return' = acceptor → initiator; ordinal: 0-based index of the message within its
-- connection and direction, in order of its start (send_t, else recv_t).
CREATE TABLE connection (
    session_id BIGINT NOT NULL,
    id BIGINT NOT NULL,
    proto TEXT NOT NULL,
    initiator_from TEXT NOT NULL,
    initiator_process_id BIGINT,
    initiator_thread_id BIGINT,
    acceptor_process_id BIGINT,
    acceptor_thread_id BIGINT,
    initiator_endpoint TEXT NOT NULL,
    acceptor_endpoint TEXT NOT NULL,
    t_first BIGINT,
    t_last BIGINT,
    call_messages BIGINT NOT NULL,
    call_bytes BIGINT NOT NULL,
    return_messages BIGINT NOT NULL,
    return_bytes BIGINT NOT NULL,
    PRIMARY KEY (session_id, id)
);
ALTER TABLE message ADD COLUMN connection_id BIGINT;
ALTER TABLE message ADD COLUMN direction TEXT;
ALTER TABLE message ADD COLUMN ordinal BIGINT;
CREATE INDEX message_by_connection ON message (session_id, connection_id, direction, ordinal);

SELECT id, connection_id, direction, ordinal, bytes, send_t, recv_end FROM message ORDER BY connection_id, direction, ordinal LIMIT 12

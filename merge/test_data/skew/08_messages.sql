SELECT id, proto, bytes, send_process_id, send_thread_id, send_t, send_end, recv_process_id, recv_thread_id, recv_t, recv_end, recv_calls, violation FROM message ORDER BY id

SELECT COUNT(*) AS matched, SUM(CASE WHEN recv_end < send_t THEN 1 ELSE 0 END) AS violations, MIN(recv_end - send_t) AS min_latency FROM message WHERE send_t IS NOT NULL AND recv_end IS NOT NULL

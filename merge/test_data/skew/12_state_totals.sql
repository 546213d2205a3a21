SELECT thread_id, state, COUNT(*) AS n, CAST(SUM(t_end - t_start) AS BIGINT) AS total FROM state GROUP BY thread_id, state ORDER BY thread_id, state

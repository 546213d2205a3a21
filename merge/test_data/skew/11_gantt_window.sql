SELECT thread_id, t_start, t_end, state, op, fd, result FROM state WHERE thread_id IN (1, 2) AND t_end > 1199000000 AND t_start < 1204000000 ORDER BY thread_id, t_start

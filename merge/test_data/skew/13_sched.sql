SELECT host_id, cpu, tid, thread_id, t_start, t_end, end_state FROM sched ORDER BY host_id, cpu, t_start LIMIT 12

SELECT id, host_id, uid, pid, program, argv, runtime, clock, t_start, t_end FROM process ORDER BY id

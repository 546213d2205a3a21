SELECT id, process_id, stream, kind, tid, name, t_start, t_end, events, dropped FROM thread ORDER BY id

SELECT id, severity, kind, process_id, count, message FROM diagnostic ORDER BY id

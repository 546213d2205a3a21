SELECT id, name, base_run_id, base_mono_ns, t_min, t_max, events, processes, threads, messages, matched, violations, diagnostics FROM session

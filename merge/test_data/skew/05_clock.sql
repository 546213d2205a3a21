SELECT process_id, domain, method, offset_ns, drift_ppm, forward_samples, backward_samples, error_bound_ns, cosmos_min_ns, tighten_ns FROM clock_estimate ORDER BY process_id

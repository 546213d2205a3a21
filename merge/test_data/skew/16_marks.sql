SELECT thread_id, sensor_id, t FROM mark ORDER BY t

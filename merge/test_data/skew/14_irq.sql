SELECT host_id, cpu, irq, t, duration, handled FROM irq ORDER BY t LIMIT 5

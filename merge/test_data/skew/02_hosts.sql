SELECT id, boot_id, machine_id, hostname FROM host ORDER BY id

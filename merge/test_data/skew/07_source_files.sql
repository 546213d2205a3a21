SELECT id, path, language, sha256, lines, text FROM source_file ORDER BY id

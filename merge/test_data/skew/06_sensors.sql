SELECT hex, kind, file, source_file_id, function, name, line, col, end_line, end_col FROM sensor ORDER BY hex

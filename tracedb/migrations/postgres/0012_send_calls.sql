-- A message written in several sends (headers then body, a split sendall) is one row since
-- merge coalesces its pieces (PostgreSQL; docs/schema.md): how many send calls wrote it.
ALTER TABLE message ADD COLUMN send_calls BIGINT NOT NULL DEFAULT 1;

-- +goose Up
ALTER TABLE orders ADD COLUMN total_cents bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE orders DROP COLUMN total_cents;

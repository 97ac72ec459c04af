-- +goose Up
CREATE TABLE orders (
    id        bigint PRIMARY KEY,
    customer  text NOT NULL,
    placed_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE orders;

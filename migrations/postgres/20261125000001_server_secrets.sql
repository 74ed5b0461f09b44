-- Secrets the service makes for itself, shared by every replica: `sealing` authenticates
-- and encrypts the `encrypted_content` of compaction items when ENCRYPTION_KEYS is unset.
-- 64 hex digits from two random UUIDs: 244 random bits, without pgcrypto.
create table server_secrets (
    name  text primary key,
    value text not null
);

insert into server_secrets (name, value)
values ('sealing', replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''));

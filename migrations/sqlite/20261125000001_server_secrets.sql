-- Secrets the service makes for itself: `sealing` authenticates and encrypts the
-- `encrypted_content` of compaction items when ENCRYPTION_KEYS is unset.
create table server_secrets (
    name  text primary key,
    value text not null
);

insert into server_secrets (name, value) values ('sealing', lower(hex(randomblob(32))));

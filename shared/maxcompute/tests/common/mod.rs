//! Shared set-up for the tests against the MaxCompute emulator.

#![allow(dead_code)]

use std::time::Duration;

use floe_maxcompute::{ClientConfig, MaxComputeClient, TableTunnel, TunnelOptions};
use floe_signing::Credentials;
use floe_testbed::maxcompute::{MaxComputeEmulator, MaxComputeEmulatorConfig, TableDef};
use floe_tunnel_codec::{TableSchema, Value};

pub const PROJECT: &str = "proj";

pub fn creds() -> Credentials {
    Credentials::new("LTAI5tTestAccessKeyId01", "test-secret")
}

pub struct Env {
    pub emu: MaxComputeEmulator,
    pub client: MaxComputeClient,
    pub tunnel: TableTunnel,
}

pub fn client_config(emu: &MaxComputeEmulator, credentials: Credentials) -> ClientConfig {
    let mut c = ClientConfig::new(emu.endpoint(), PROJECT, credentials);
    c.sql_poll_interval = Duration::from_millis(5);
    c.request_timeout = Duration::from_secs(10);
    c
}

pub async fn env() -> Env {
    env_with(
        MaxComputeEmulatorConfig::new(creds()),
        TunnelOptions::default(),
    )
    .await
}

pub async fn env_with(config: MaxComputeEmulatorConfig, tunnel: TunnelOptions) -> Env {
    let emu = MaxComputeEmulator::start(config).await.unwrap();
    let client = MaxComputeClient::new(client_config(&emu, creds())).unwrap();
    let tunnel = TableTunnel::connect(&client, tunnel).await.unwrap();
    Env {
        emu,
        client,
        tunnel,
    }
}

pub fn schema(cols: &[(&str, &str)]) -> TableSchema {
    TableSchema::from_type_strings(cols.iter().copied()).unwrap()
}

/// `id bigint, name string` rows.
pub fn rows(items: &[(i64, &str)]) -> Vec<Vec<Value>> {
    items
        .iter()
        .map(|(id, name)| vec![Value::BigInt(*id), Value::String((*name).into())])
        .collect()
}

pub fn sorted(mut rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.sort_by_key(|r| match r.first() {
        Some(Value::BigInt(i)) => *i,
        _ => i64::MIN,
    });
    rows
}

pub fn events_table() -> TableDef {
    TableDef::new(
        PROJECT,
        "events",
        schema(&[("id", "bigint"), ("name", "string")]),
    )
}

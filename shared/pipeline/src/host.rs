//! This process and the host it runs on: who owns the batches and leases it writes, and
//! whether an owner recorded by an earlier process on this host is still running.

use crate::protocol::records::Owner;

/// A new owner for this process: host, pid and a fresh run id.
pub fn this_process() -> Owner {
    Owner {
        host: hostname(),
        pid: std::process::id(),
        run: uuid::Uuid::now_v7().to_string(),
    }
}

/// Whether `owner` is a process on this host that no longer exists (it crashed).
pub fn is_dead_local_process(owner: &Owner) -> bool {
    owner.host == hostname() && owner.pid != std::process::id() && !process_alive(owner.pid)
}

/// This machine's name.
pub fn hostname() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|s| s.trim().to_owned())
        })
        .unwrap_or_else(|| "localhost".into())
}

fn process_alive(pid: u32) -> bool {
    let proc = std::path::Path::new("/proc");
    if !proc.exists() {
        return true; // cannot tell: rely on timeouts
    }
    proc.join(pid.to_string()).exists()
}

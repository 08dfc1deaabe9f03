//! This process and the host it runs on: who owns the batches and leases it writes, and
//! whether an owner recorded by an earlier process on this host is still running.

use crate::protocol::records::Owner;

/// A new owner for this process: host, pid, the pid's namespace and a fresh run id.
pub fn this_process() -> Owner {
    Owner {
        host: hostname(),
        pid: std::process::id(),
        run: uuid::Uuid::now_v7().to_string(),
        pid_space: PID_SPACE.clone(),
    }
}

/// Whether `owner` is a process of this host's pid namespace that no longer exists (it
/// crashed). A host name alone does not say so: function instances in separate containers or
/// micro-VMs can share one (and small pids), and a pid missing from this `/proc` may be a live
/// process in another namespace. So the owner's recorded pid namespace must be this one; an
/// owner without one (written elsewhere, or by an older floe) is never judged dead here, only
/// by its lease or claim running out.
pub fn is_dead_local_process(owner: &Owner) -> bool {
    is_dead_in(owner, &hostname(), PID_SPACE.as_deref(), &process_alive)
}

fn is_dead_in(owner: &Owner, host: &str, space: Option<&str>, alive: &dyn Fn(u32) -> bool) -> bool {
    let same_space = space.is_some() && owner.pid_space.as_deref() == space;
    owner.host == host && same_space && owner.pid != std::process::id() && !alive(owner.pid)
}

/// This process's pid namespace on this boot of this kernel (`<boot id>/pid:[inode]`), where
/// Linux tells it: two processes with the same value see the same `/proc`. Read once.
static PID_SPACE: std::sync::LazyLock<Option<String>> = std::sync::LazyLock::new(pid_space);

fn pid_space() -> Option<String> {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    Some(format!("{}/{}", boot.trim(), ns.display()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(host: &str, pid_space: Option<&str>) -> Owner {
        Owner {
            host: host.into(),
            pid: 4_000_000,
            run: "r".into(),
            pid_space: pid_space.map(Into::into),
        }
    }

    #[test]
    fn only_an_owner_of_this_pid_namespace_is_judged_by_this_proc() {
        let gone = |_| false;
        let here = Some("boot/pid:[1]");
        // Same host name, same namespace, pid gone: it crashed.
        assert!(is_dead_in(&owner("h", here), "h", here, &gone));
        // Same host name but another container's namespace (or none recorded): its pid means
        // nothing in this /proc, so it is not taken for dead.
        assert!(!is_dead_in(
            &owner("h", Some("boot/pid:[2]")),
            "h",
            here,
            &gone
        ));
        assert!(!is_dead_in(&owner("h", None), "h", here, &gone));
        assert!(!is_dead_in(&owner("h", None), "h", None, &gone));
        assert!(!is_dead_in(&owner("other", here), "h", here, &gone));
        assert!(!is_dead_in(&owner("h", here), "h", here, &|_| true));
    }

    #[test]
    fn this_process_records_its_pid_namespace() {
        let me = this_process();
        if std::path::Path::new("/proc/self/ns/pid").exists() {
            assert!(me.pid_space.unwrap().contains("pid:["));
        }
    }
}

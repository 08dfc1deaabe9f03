//! The queues' state: messages, visibility, receipt handles. No IO; times are epoch ms.

use std::collections::{BTreeMap, HashMap};

use md5::{Digest, Md5};

/// A message as the emulator stores it.
#[derive(Clone, Debug)]
pub(crate) struct StoredMessage {
    pub(crate) seq: u64,
    pub(crate) id: String,
    pub(crate) body: String,
    pub(crate) body_md5: String,
    pub(crate) enqueue_ms: i64,
    pub(crate) first_dequeue_ms: Option<i64>,
    pub(crate) next_visible_ms: i64,
    pub(crate) dequeue_count: u32,
    pub(crate) priority: u32,
    /// The only handle that currently works (until `next_visible_ms`).
    pub(crate) handle: Option<String>,
}

/// Why a receipt handle was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HandleError {
    /// Expired, or its message is gone: 404 `MessageNotExist`.
    MessageNotExist,
    /// Never issued, or replaced by ChangeMessageVisibility: 400 `ReceiptHandleError`.
    ReceiptHandleError,
}

#[derive(Clone, Copy, Debug)]
struct HandleInfo {
    queue_seq: u64,
    replaced: bool,
}

/// One queue.
#[derive(Debug)]
pub(crate) struct Queue {
    pub(crate) visibility_timeout_ms: i64,
    /// By (enqueue time, sequence): receive order.
    messages: BTreeMap<(i64, u64), StoredMessage>,
    handles: HashMap<String, HandleInfo>,
    next_handle: u64,
}

impl Queue {
    pub(crate) fn new(visibility_timeout_ms: i64) -> Self {
        Queue {
            visibility_timeout_ms,
            messages: BTreeMap::new(),
            handles: HashMap::new(),
            next_handle: 1,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.messages.len()
    }

    pub(crate) fn push(&mut self, seq: u64, body: String, enqueue_ms: i64, now_ms: i64) -> String {
        let id = format!("{:016X}-1-{seq:X}", enqueue_ms);
        let body_md5 = hex::encode_upper(Md5::digest(body.as_bytes()));
        self.messages.insert(
            (enqueue_ms, seq),
            StoredMessage {
                seq,
                id: id.clone(),
                body,
                body_md5,
                enqueue_ms,
                first_dequeue_ms: None,
                next_visible_ms: now_ms.min(enqueue_ms),
                dequeue_count: 0,
                priority: 8,
                handle: None,
            },
        );
        id
    }

    /// Receive up to `n` visible messages at `now_ms`.
    pub(crate) fn receive(&mut self, n: usize, now_ms: i64) -> Vec<StoredMessage> {
        let keys: Vec<(i64, u64)> = self
            .messages
            .iter()
            .filter(|(_, m)| m.next_visible_ms <= now_ms)
            .take(n)
            .map(|(k, _)| *k)
            .collect();
        let mut out = Vec::with_capacity(keys.len());
        for key in keys {
            let handle = self.new_handle(key.1);
            let vt = self.visibility_timeout_ms;
            if let Some(m) = self.messages.get_mut(&key) {
                m.dequeue_count += 1;
                m.first_dequeue_ms.get_or_insert(now_ms);
                m.next_visible_ms = now_ms + vt;
                m.handle = Some(handle);
                out.push(m.clone());
            }
        }
        out
    }

    /// When the next invisible message becomes visible, if any.
    pub(crate) fn next_visible_after(&self, now_ms: i64) -> Option<i64> {
        self.messages
            .values()
            .map(|m| m.next_visible_ms)
            .filter(|t| *t > now_ms)
            .min()
    }

    pub(crate) fn delete(&mut self, handle: &str, now_ms: i64) -> Result<(), HandleError> {
        let key = self.check_handle(handle, now_ms)?;
        self.messages.remove(&key);
        Ok(())
    }

    /// Make the message invisible until `now_ms + timeout_ms`; returns the new handle and time.
    pub(crate) fn change_visibility(
        &mut self,
        handle: &str,
        timeout_ms: i64,
        now_ms: i64,
    ) -> Result<(String, i64), HandleError> {
        let key = self.check_handle(handle, now_ms)?;
        if let Some(info) = self.handles.get_mut(handle) {
            info.replaced = true;
        }
        let new = self.new_handle(key.1);
        let m = self
            .messages
            .get_mut(&key)
            .ok_or(HandleError::MessageNotExist)?;
        m.next_visible_ms = now_ms + timeout_ms;
        m.handle = Some(new.clone());
        Ok((new, m.next_visible_ms))
    }

    fn check_handle(&self, handle: &str, now_ms: i64) -> Result<(i64, u64), HandleError> {
        let info = self
            .handles
            .get(handle)
            .ok_or(HandleError::ReceiptHandleError)?;
        if info.replaced {
            return Err(HandleError::ReceiptHandleError);
        }
        let (key, m) = self
            .messages
            .iter()
            .find(|(_, m)| m.seq == info.queue_seq)
            .ok_or(HandleError::MessageNotExist)?;
        if m.handle.as_deref() != Some(handle) || m.next_visible_ms <= now_ms {
            return Err(HandleError::MessageNotExist);
        }
        Ok(*key)
    }

    fn new_handle(&mut self, seq: u64) -> String {
        use base64::Engine as _;
        let n = self.next_handle;
        self.next_handle += 1;
        let raw = format!("{seq}-{n}-emulator");
        let handle = format!(
            "1-{}",
            base64::engine::general_purpose::STANDARD.encode(raw.as_bytes())
        );
        self.handles.insert(
            handle.clone(),
            HandleInfo {
                queue_seq: seq,
                replaced: false,
            },
        );
        handle
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visibility_handles_and_dequeue_count() {
        let mut q = Queue::new(1000);
        q.push(1, "a".into(), 0, 0);
        let first = q.receive(16, 10);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].dequeue_count, 1);
        assert!(q.receive(16, 500).is_empty(), "inactive until 1010");
        let h1 = first[0].handle.clone().unwrap();
        // Expired at 1010: the message is received again with a new handle.
        let again = q.receive(16, 1010);
        assert_eq!(again[0].dequeue_count, 2);
        assert_eq!(q.delete(&h1, 1011), Err(HandleError::MessageNotExist));
        let h2 = again[0].handle.clone().unwrap();
        let (h3, until) = q.change_visibility(&h2, 5000, 1020).unwrap();
        assert_eq!(until, 6020);
        assert_eq!(q.delete(&h2, 1030), Err(HandleError::ReceiptHandleError));
        assert_eq!(
            q.delete("1-bogus", 1030),
            Err(HandleError::ReceiptHandleError)
        );
        assert_eq!(q.delete(&h3, 1030), Ok(()));
        assert_eq!(q.len(), 0);
        assert_eq!(q.delete(&h3, 1031), Err(HandleError::MessageNotExist));
    }
}

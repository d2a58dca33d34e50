//! Fault injection for the outbox worker: what a test installs to drive
//! the real service through failed, duplicated, reordered and stale
//! deliveries. Nothing in the product installs one.

use mosaic_index::PublishMessage;
use mosaic_store::OutboxTask;

/// One message the outbox worker hands an index target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexDelivery {
    /// Publish one generation of a record.
    Publish(PublishMessage),
    /// Remove the record's content at this generation.
    Tombstone {
        /// The record.
        record_id: String,
        /// The tombstone generation.
        generation: u64,
    },
}

/// What an injected fault does to one outbox delivery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutboxFault {
    /// Apply, then acknowledge (no fault).
    Deliver,
    /// The target refuses it: nothing applied, the row stays pending.
    Refuse,
    /// Applied, then the worker dies before acknowledging: the row stays
    /// pending and is delivered again later.
    ApplyWithoutAck,
    /// Applied twice (a duplicated delivery), then acknowledged.
    DeliverTwice,
}

/// Fault injection for the outbox worker, so tests can drive the real
/// service through failed, duplicated, reordered and stale deliveries.
/// Nothing in the product installs one.
pub trait OutboxFaults: Send + Sync {
    /// The delivery order of one pending batch of `target`: indices into
    /// `batch`; an omitted row stays pending, a repeated one is delivered
    /// again.
    fn schedule(&self, target: &str, batch: &[OutboxTask]) -> Vec<usize>;
    /// The fault for one delivery (called for every delivery).
    fn fault(&self, target: &str, delivery: &IndexDelivery) -> OutboxFault;
    /// Old messages a slow or restarted worker still holds, delivered to
    /// `target` after the batch and never acknowledged.
    fn stale(&self, target: &str) -> Vec<IndexDelivery>;
    /// Most vectors a pass may leave unlinked, in place of the service's
    /// bound: a graph linker that has fallen that far behind.
    fn max_unlinked(&self) -> Option<usize> {
        None
    }
}

//! Connections: the table of open connections and their state, the bounded outboxes frames
//! wait in, the inputs that arrive on a connection (bytes, end of input, deadlines) and the
//! frames sent back (responses, framed bodies, "latest state" broadcasts).

pub(in crate::host) mod conn;
pub(in crate::host) mod conn_table;
pub(in crate::host) mod input;
pub(in crate::host) mod latest;
pub(in crate::host) mod outbox;
pub(in crate::host) mod send;

//! The threads that look after the servers, beside the engines (never inside one): the health
//! probe of servers that are down and the restart check ([`probe`]), the repair thread that
//! brings replicas up to date ([`repair`], a resync's key list from [`metadump`]) and the spool thread that keeps repair sets on disk
//! ([`spool`], its file format in [`spool_file`]).

pub(crate) mod identities;
pub(crate) mod metadump;
pub(crate) mod probe;
pub(crate) mod repair;
pub(crate) mod spool;
pub(crate) mod spool_file;

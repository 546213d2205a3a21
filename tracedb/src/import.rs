//! Writing a whole session that did not come from `p5 merge`: `p5 analyze import` turns a
//! capture or a text trace into the same tables (a host, process and thread per node, a
//! state lane per thread, connections, messages) so the viewer shows software that was
//! never instrumented, with its arrows.
//!
//! The rules are merge's: re-importing a session name replaces it (every table keyed by the
//! session, the analysis tables included), the whole import is one transaction, and when
//! the session is alone in the database the indexes are dropped for the load and rebuilt
//! before the commit. Rows are built by the caller once the session id is known
//! ([`Db::import_session`] hands it over); messages are streamed, never all in memory as rows.

use crate::error::Error;
use crate::schema;
use crate::write::{Db, Writer};

/// The rows of one imported session. Every row's `session_id` must be the id handed to the
/// builder; the `session` row's `id` and `name` are set by [`Db::import_session`].
#[derive(Debug)]
pub struct SessionRows<M> {
    /// The `session` row.
    pub session: schema::Session,
    /// Hosts.
    pub hosts: Vec<schema::Host>,
    /// Processes.
    pub processes: Vec<schema::Process>,
    /// Threads.
    pub threads: Vec<schema::Thread>,
    /// Thread states (the viewer draws a lane for a thread that has some).
    pub states: Vec<schema::State>,
    /// Connections.
    pub connections: Vec<schema::Connection>,
    /// Messages, streamed.
    pub messages: M,
}

impl Db {
    /// Writes session `name` from the rows `build(session id)` returns, replacing a session
    /// of that name, in one transaction; `progress` is called with the messages written so
    /// far every 65,536 messages. Returns the connection and the session id.
    pub async fn import_session<M, F>(
        mut self,
        name: &str,
        build: F,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(Db, i64), Error>
    where
        M: IntoIterator<Item = schema::Message>,
        F: FnOnce(i64) -> SessionRows<M>,
    {
        self.begin().await?;
        let prepared = async {
            let bulk = self.alone(name).await?;
            let sid = self.replace_session(name, bulk).await?;
            if bulk {
                self.indexes(false).await?;
            }
            Ok::<_, Error>((sid, bulk))
        }
        .await;
        let (sid, bulk) = match prepared {
            Ok(v) => v,
            Err(e) => {
                let _ = self.rollback().await;
                return Err(e);
            }
        };
        let rows = build(sid);
        let mut session = rows.session;
        session.id = sid;
        name.clone_into(&mut session.name);
        let mut w = Writer::new(self);
        // On an error the connection is dropped with the transaction open: it rolls back.
        for r in rows.hosts {
            w.row(r).await?;
        }
        for r in rows.processes {
            w.row(r).await?;
        }
        for r in rows.threads {
            w.row(r).await?;
        }
        for r in rows.states {
            w.row(r).await?;
        }
        for r in rows.connections {
            w.row(r).await?;
        }
        let mut n = 0u64;
        for r in rows.messages {
            w.row(r).await?;
            n += 1;
            if n.is_multiple_of(65_536) {
                progress(n);
            }
        }
        progress(n);
        let mut db = w.finish().await?;
        let r = async {
            if bulk {
                db.indexes(true).await?;
            }
            db.insert_session(session).await
        }
        .await;
        match r {
            Ok(()) => {
                db.commit().await?;
                Ok((db, sid))
            }
            Err(e) => {
                let _ = db.rollback().await;
                Err(e)
            }
        }
    }
}

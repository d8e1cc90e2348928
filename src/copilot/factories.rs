//! Agent factories (`session.factory.*`): runs of the factories that extensions provide
//! (the host's `extensions.rs` tracks them). `run` and `resume` are answered when the run
//! settles; a refused `resume` carries the SDK's `FactoryResumeError` code in `data.code`.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;

use crate::host::extensions::RunWaiter;
use crate::host::Host;

use super::method_table::{Call, Reply};
use super::surface::{decode, known, Answer};

/// `session.factory.run` params.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunParams {
    session_id: String,
    name: String,
    #[serde(default)]
    args: Value,
}

/// Params naming one run.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RunIdParams {
    session_id: String,
    run_id: String,
}

/// `session.factory.run`: starts a run; answered with its terminal envelope.
pub(super) fn run(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let p: RunParams = match decode(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known(host, call.method, &p.session_id) {
        return Some(Err(e));
    }
    let waiter = RunWaiter::new(call.conn, call.id.clone(), false);
    match host.run_factory(&p.session_id, &p.name, p.args, waiter) {
        Ok(()) => None,
        Err(refusal) => Some(Err(host.factory_error(call.conn, call.method, refusal))),
    }
}

/// `session.factory.resume`: re-executes a failed run; answered `{factoryName, run}` when it
/// settles.
pub(super) fn resume(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Reply {
    let p: RunIdParams = match decode(params) {
        Ok(p) => p,
        Err(e) => return Some(Err(e)),
    };
    if let Err(e) = known(host, call.method, &p.session_id) {
        return Some(Err(e));
    }
    let waiter = RunWaiter::new(call.conn, call.id.clone(), true);
    match host.resume_factory(&p.session_id, &p.run_id, waiter) {
        Ok(()) => None,
        Err(refusal) => Some(Err(host.factory_error(call.conn, call.method, refusal))),
    }
}

/// `session.factory.getRun`: the run's envelope.
pub(super) fn get_run(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: RunIdParams = decode(params)?;
    known(host, call.method, &p.session_id)?;
    host.factory_run(&p.session_id, &p.run_id)
        .map_err(|refusal| host.factory_error(call.conn, call.method, refusal))
}

/// `session.factory.cancel`: cancels a running run; its envelope.
pub(super) fn cancel(host: &mut Host, call: &Call<'_>, params: Option<&RawValue>) -> Answer {
    let p: RunIdParams = decode(params)?;
    known(host, call.method, &p.session_id)?;
    host.cancel_factory(&p.session_id, &p.run_id)
        .map_err(|refusal| host.factory_error(call.conn, call.method, refusal))
}

/// `session.extensions.list`: the extensions the session started, with their status.
pub(super) fn extensions_list(host: &mut Host, _: &Call<'_>, session: &str, _: &Value) -> Answer {
    Ok(host.extensions_json(session))
}

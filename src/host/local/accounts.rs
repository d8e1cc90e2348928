//! GitHub accounts signed in to this server (`account.login` / `logout` / `getCurrentAuth` /
//! `getAllUsers`).
//!
//! agentwire has no secure store for tokens (no system keychain, and it never writes a token
//! in plain text to disk), so a login lives in memory for the server's lifetime and its
//! answer says it was not stored (`storedInVault: false`). The most recent login is the
//! current account; logging it out makes the previous one current.

use serde_json::{json, Value};

use crate::jsonrpc::{code, ErrorObject};

/// One signed-in account.
#[derive(Clone, PartialEq, Eq)]
struct Account {
    host: String,
    login: String,
    token: String,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("host", &self.host)
            .field("login", &self.login)
            .finish_non_exhaustive()
    }
}

impl Account {
    fn auth_info(&self) -> Value {
        json!({"type": "user", "host": self.host, "login": self.login})
    }
}

/// The signed-in accounts, the current one last.
#[derive(Debug, Default)]
pub(crate) struct Accounts {
    signed_in: Vec<Account>,
}

fn invalid(message: &str) -> ErrorObject {
    ErrorObject::new(code::INVALID_PARAMS, format!("invalid params: {message}"))
}

fn text<'a>(params: &'a Value, field: &str) -> Option<&'a str> {
    params
        .get(field)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

impl Accounts {
    /// `account.login {host, login, token}`: the account becomes the current one (a second
    /// login of the same user on the same host replaces its token).
    pub(crate) fn login(&mut self, params: &Value) -> Result<Value, ErrorObject> {
        let host = text(params, "host").ok_or_else(|| invalid("`host` is required"))?;
        let token = text(params, "token").ok_or_else(|| invalid("`token` is required"))?;
        let Some(login) = text(params, "login") else {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                "account.login: `login` is required: agentwire does not look the token's user \
                 up on GitHub",
            ));
        };
        let host = host.trim_end_matches('/').to_owned();
        self.signed_in
            .retain(|a| !(a.host == host && a.login == login));
        self.signed_in.push(Account {
            host,
            login: login.to_owned(),
            token: token.to_owned(),
        });
        Ok(json!({"storedInVault": false}))
    }

    /// `account.getCurrentAuth`: the current account, if any.
    pub(crate) fn current(&self) -> Value {
        match self.signed_in.last() {
            Some(account) => json!({"authInfo": account.auth_info()}),
            None => json!({}),
        }
    }

    /// `account.getAllUsers`: every signed-in account with its token, the current one first.
    pub(crate) fn all(&self) -> Value {
        Value::Array(
            self.signed_in
                .iter()
                .rev()
                .map(|a| json!({"authInfo": a.auth_info(), "token": a.token}))
                .collect(),
        )
    }

    /// `account.logout {authInfo}` (or the auth info's fields at the top level): signs that
    /// account out; says whether others remain.
    pub(crate) fn logout(&mut self, params: &Value) -> Result<Value, ErrorObject> {
        let info = params.get("authInfo").unwrap_or(params);
        let host = text(info, "host").map(|h| h.trim_end_matches('/'));
        let login = text(info, "login");
        let (Some(host), Some(login)) = (host, login) else {
            return Err(invalid(
                "`authInfo` must name the account's `host` and `login`",
            ));
        };
        let before = self.signed_in.len();
        self.signed_in
            .retain(|a| !(a.host == host && a.login == login));
        if self.signed_in.len() == before {
            return Err(ErrorObject::new(
                code::INVALID_PARAMS,
                format!("account.logout: {login} is not signed in on {host}"),
            ));
        }
        Ok(json!({"hasMoreUsers": !self.signed_in.is_empty()}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latest_login_is_current_until_it_logs_out() {
        let mut accounts = Accounts::default();
        assert_eq!(accounts.current(), json!({}));
        let a = json!({"host": "https://github.com", "login": "a", "token": "t1"});
        let b = json!({"host": "https://github.com/", "login": "b", "token": "t2"});
        assert_eq!(accounts.login(&a).unwrap(), json!({"storedInVault": false}));
        accounts.login(&b).unwrap();
        assert_eq!(accounts.current()["authInfo"]["login"], "b");
        assert_eq!(accounts.all()[1]["token"], "t1");
        let out = accounts
            .logout(
                &json!({"authInfo": {"type": "user", "host": "https://github.com", "login": "b"}}),
            )
            .unwrap();
        assert_eq!(out, json!({"hasMoreUsers": true}));
        assert_eq!(accounts.current()["authInfo"]["login"], "a");
        assert!(accounts
            .logout(&json!({"authInfo": {"host": "https://github.com", "login": "b"}}))
            .is_err());
        assert_eq!(
            accounts
                .logout(&json!({"host": "https://github.com", "login": "a"}))
                .unwrap(),
            json!({"hasMoreUsers": false})
        );
        assert_eq!(accounts.current(), json!({}));
        assert!(accounts.login(&json!({"host": "h", "token": "t"})).is_err());
        assert!(format!("{accounts:?}").find("t1").is_none());
    }
}

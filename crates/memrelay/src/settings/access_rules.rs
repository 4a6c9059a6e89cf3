//! Access rules per identity, as the configuration file's `[[access]]` tables (each one
//! `--access '{ ... }'` on the command line) state them:
//!
//! ```toml
//! [[access]]
//! identity = "tenant-a"        # a user of the auth file; "*" = every identity without a rule
//! prefixes = ["a:", "shared:"] # the keys it may touch (left out: every key; []: none)
//! read_only = false            # true: reads only
//! admin = ["flush_all"]        # flush_all, verbosity, cache_memlimit, stats
//! ```

use std::collections::HashMap;
use std::sync::Arc;

/// The admin commands a rule can grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Admin {
    FlushAll,
    Verbosity,
    CacheMemlimit,
    /// The `stats` groups memrelay gathers from the servers (`items`, `slabs`, `sizes`,
    /// `settings`): the servers' layout, not memrelay's counters.
    Stats,
}

impl Admin {
    pub const ALL: [Admin; 4] = [Admin::FlushAll, Admin::Verbosity, Admin::CacheMemlimit, Admin::Stats];

    pub fn name(self) -> &'static str {
        match self {
            Admin::FlushAll => "flush_all",
            Admin::Verbosity => "verbosity",
            Admin::CacheMemlimit => "cache_memlimit",
            Admin::Stats => "stats",
        }
    }

    fn bit(self) -> u8 {
        1 << self as u8
    }
}

/// What one identity may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The identity it applies to (`*`: the fallback).
    pub identity: String,
    /// Key prefixes allowed; `None`: every key.
    pub prefixes: Option<Vec<Vec<u8>>>,
    pub read_only: bool,
    /// Granted admin commands, one bit per [`Admin`].
    admin: u8,
}

/// The identity that stands for every identity without a rule of its own.
pub const FALLBACK: &str = "*";

impl Rule {
    /// Everything allowed: what every connection may do when no authentication is configured and
    /// no `*` rule says otherwise (memrelay without access control).
    pub fn everything() -> Rule {
        let admin = Admin::ALL.iter().fold(0, |bits, a| bits | a.bit());
        Rule { identity: FALLBACK.into(), prefixes: None, read_only: false, admin }
    }

    /// What an authenticated identity without a rule (and without a `*` rule) may do: every key,
    /// reads and writes, no admin command.
    pub fn no_admin() -> Rule {
        Rule { admin: 0, ..Rule::everything() }
    }

    pub fn grants(&self, admin: Admin) -> bool {
        self.admin & admin.bit() != 0
    }

    /// Whether `key` starts with an allowed prefix.
    pub fn allows_key(&self, key: &[u8]) -> bool {
        self.prefixes.as_ref().is_none_or(|prefixes| prefixes.iter().any(|p| key.starts_with(p)))
    }

    /// What a connection without an identity may do when identities exist and no `*` rule says
    /// otherwise: no key (requests without a key, `version`, `stats`, `mn`, are answered), no
    /// admin command. So a client that could not be identified (the plain listener beside a TLS
    /// listener taking certificates; a certificate without a usable name) is never let in
    /// silently.
    pub fn nothing() -> Rule {
        Rule { identity: FALLBACK.into(), prefixes: Some(Vec::new()), read_only: false, admin: 0 }
    }

    /// Whether nothing is ever refused by this rule (the check can be skipped).
    pub fn allows_everything(&self) -> bool {
        *self == Rule { identity: self.identity.clone(), ..Rule::everything() }
    }

    /// One rule from a TOML inline table, `{ identity = "a", prefixes = ["a:"] }` (the braces may
    /// be left out: `identity = "a", prefixes = ["a:"]`).
    pub fn parse(text: &str) -> Result<Rule, String> {
        let inner = text.trim();
        let inner = inner.strip_prefix('{').and_then(|t| t.strip_suffix('}')).unwrap_or(inner);
        let document = format!("rule = {{ {inner} }}");
        let mut table: toml::Table = document
            .parse()
            .map_err(|e: toml::de::Error| format!("access rule `{text}` is not a TOML table: {}", e.message()))?;
        match table.remove("rule") {
            Some(toml::Value::Table(rule)) => Rule::from_table(&rule),
            _ => Err(format!("access rule `{text}` is not a TOML table")),
        }
    }

    /// One rule from its table (the error names the identity when it has one).
    pub fn from_table(table: &toml::Table) -> Result<Rule, String> {
        let who = match table.get("identity") {
            Some(toml::Value::String(identity)) => identity.clone(),
            Some(_) => return Err("access rule: `identity` must be a string".into()),
            None => return Err("access rule without `identity`".into()),
        };
        let bad = |what: String| format!("access rule for `{who}`: {what}");
        if who.is_empty() || who.contains(|c: char| c == ' ' || c.is_control()) {
            return Err(bad("the identity must be one word (an auth file user, or \"*\")".into()));
        }
        let mut rule = Rule { identity: who.clone(), prefixes: None, read_only: false, admin: 0 };
        for (key, value) in table {
            match (key.as_str(), value) {
                ("identity", _) => {}
                ("prefixes", toml::Value::Array(items)) => {
                    let mut prefixes = Vec::with_capacity(items.len());
                    for item in items {
                        let toml::Value::String(prefix) = item else {
                            return Err(bad("`prefixes` must be a list of strings".into()));
                        };
                        if prefix.len() > memrelay_protocol::limits::MAX_KEY_LEN
                            || prefix.bytes().any(|b| b == b' ' || b.is_ascii_control())
                        {
                            return Err(bad(format!(
                                "prefix `{}` cannot start a key (spaces, control bytes, over 250 bytes)",
                                prefix.escape_debug()
                            )));
                        }
                        prefixes.push(prefix.as_bytes().to_vec());
                    }
                    rule.prefixes = Some(prefixes);
                }
                ("read_only", toml::Value::Boolean(read_only)) => rule.read_only = *read_only,
                ("admin", toml::Value::Array(items)) => {
                    for item in items {
                        let granted = match item {
                            toml::Value::String(name) => Admin::ALL.into_iter().find(|a| a.name() == name),
                            _ => None,
                        };
                        let Some(granted) = granted else {
                            let names: Vec<&str> = Admin::ALL.iter().map(|a| a.name()).collect();
                            return Err(bad(format!("`admin` takes {} (not {item})", names.join(", "))));
                        };
                        rule.admin |= granted.bit();
                    }
                }
                ("prefixes" | "read_only" | "admin", _) => {
                    let shape = match key.as_str() {
                        "read_only" => "true or false",
                        _ => "a list of strings",
                    };
                    return Err(bad(format!("`{key}` must be {shape}")));
                }
                _ => return Err(bad(format!("unknown key `{key}` (identity, prefixes, read_only, admin)"))),
            }
        }
        Ok(rule)
    }

    /// The rule as a TOML inline table, the form [`Rule::parse`] reads.
    pub fn to_inline(&self) -> String {
        let mut parts = vec![format!("identity = {}", toml::Value::from(self.identity.as_str()))];
        if let Some(prefixes) = &self.prefixes {
            let list: Vec<String> =
                prefixes.iter().map(|p| toml::Value::from(String::from_utf8_lossy(p).as_ref()).to_string()).collect();
            parts.push(format!("prefixes = [{}]", list.join(", ")));
        }
        parts.push(format!("read_only = {}", self.read_only));
        let admin: Vec<String> =
            Admin::ALL.iter().filter(|a| self.grants(**a)).map(|a| format!("\"{}\"", a.name())).collect();
        parts.push(format!("admin = [{}]", admin.join(", ")));
        format!("{{ {} }}", parts.join(", "))
    }
}

/// The rules by identity, with the one that applies to an identity without its own and the one
/// that applies to a connection without an identity.
///
/// | identities exist (auth file or client certificates) | `*` rule | identity with no rule | no identity |
/// |---|---|---|---|
/// | no  | none  | everything           | everything            |
/// | no  | given | `*`                  | `*`                   |
/// | yes | none  | every key, no admin  | nothing (no key)      |
/// | yes | given | `*`                  | `*`                   |
#[derive(Debug, Clone)]
/// Rules are shared (`Arc`): every connection holds the one that applies to it, without a copy
/// of its identity and prefixes.
pub struct Rules {
    by_identity: HashMap<Vec<u8>, Arc<Rule>>,
    fallback: Arc<Rule>,
    anonymous: Arc<Rule>,
}

impl Rules {
    /// The rules in force: `authenticated` says whether connections log in (then an identity
    /// without a rule gets [`Rule::no_admin`], else every connection gets [`Rule::everything`]),
    /// unless a `*` rule says otherwise. Two rules for one identity are refused.
    pub fn new(rules: &[Rule], authenticated: bool) -> Result<Rules, String> {
        let mut by_identity = HashMap::new();
        let mut fallback = None;
        for rule in rules {
            if rule.identity == FALLBACK {
                if fallback.replace(rule.clone()).is_some() {
                    return Err("two access rules for identity `*`".into());
                }
            } else if by_identity.insert(rule.identity.as_bytes().to_vec(), Arc::new(rule.clone())).is_some() {
                return Err(format!("two access rules for identity `{}`", rule.identity));
            }
        }
        if !authenticated && !by_identity.is_empty() {
            return Err(
                "access rules name identities, which need --auth-file or --tls-client-ca (only `*` applies without them)"
                    .into(),
            );
        }
        let anonymous = fallback.clone().unwrap_or_else(|| match authenticated {
            true => Rule::nothing(),
            false => Rule::everything(),
        });
        let fallback = fallback.unwrap_or_else(|| if authenticated { Rule::no_admin() } else { Rule::everything() });
        Ok(Rules { by_identity, fallback: Arc::new(fallback), anonymous: Arc::new(anonymous) })
    }

    /// The rule for `identity`; `None`: a connection without an identity (it did not log in,
    /// when none must; a plain client beside certificate identities; a certificate without a
    /// usable name): the `*` rule, else nothing when identities exist, else everything.
    pub fn for_identity(&self, identity: Option<&[u8]>) -> &Arc<Rule> {
        match identity {
            Some(name) => self.by_identity.get(name).unwrap_or(&self.fallback),
            None => &self.anonymous,
        }
    }

    /// The identities with a rule of their own.
    pub fn identities(&self) -> impl Iterator<Item = &str> {
        self.by_identity.values().map(|r| r.identity.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_reads_its_table_and_refuses_what_it_does_not_know() {
        let rule =
            Rule::parse(r#"{ identity = "tenant-a", prefixes = ["a:", "shared:"], admin = ["flush_all", "stats"] }"#)
                .unwrap();
        assert_eq!(rule.identity, "tenant-a");
        assert!(rule.allows_key(b"a:1") && rule.allows_key(b"shared:x") && !rule.allows_key(b"b:1"));
        assert!(!rule.allows_key(b"a") && !rule.read_only);
        assert!(rule.grants(Admin::FlushAll) && rule.grants(Admin::Stats) && !rule.grants(Admin::Verbosity));
        // The braces may be left out; no prefixes means every key, [] none.
        let all = Rule::parse(r#"identity = "b", read_only = true"#).unwrap();
        assert!(all.allows_key(b"anything") && all.read_only);
        assert!(!Rule::parse(r#"identity = "c", prefixes = []"#).unwrap().allows_key(b"x"));
        for (text, says) in [
            (r#"identity = "a", prefix = ["a:"]"#, "unknown key `prefix`"),
            (r#"identity = "a", admin = ["shutdown"]"#, "`admin` takes flush_all"),
            (r#"identity = "a", read_only = "yes""#, "true or false"),
            (r#"identity = "a", prefixes = ["a b"]"#, "cannot start a key"),
            (r#"prefixes = ["a"]"#, "without `identity`"),
            (r#"identity = "two words""#, "one word"),
            ("identity = ", "not a TOML table"),
        ] {
            let error = Rule::parse(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
        }
    }

    #[test]
    fn a_rule_written_inline_reads_back_the_same() {
        let text = r#"{ identity = "t", prefixes = ["a:", "q\"uote"], read_only = true, admin = ["verbosity"] }"#;
        let rule = Rule::parse(text).unwrap();
        assert_eq!(Rule::parse(&rule.to_inline()).unwrap(), rule);
    }

    #[test]
    fn identities_without_a_rule_get_the_fallback() {
        let a = Rule::parse(r#"identity = "a", prefixes = ["a:"]"#).unwrap();
        let rules = Rules::new(std::slice::from_ref(&a), true).unwrap();
        assert_eq!(**rules.for_identity(Some(b"a")), a);
        // Authenticated, no rule: every key, no admin.
        let other = rules.for_identity(Some(b"z"));
        assert!(other.allows_key(b"b:1") && !other.grants(Admin::FlushAll));
        // Without authentication: everything, unless `*` says otherwise.
        assert!(Rules::new(&[], false).unwrap().for_identity(None).allows_everything());
        let star = Rule::parse(r#"identity = "*", read_only = true"#).unwrap();
        assert!(Rules::new(std::slice::from_ref(&star), false).unwrap().for_identity(None).read_only);
        // With identities, a connection without one gets no key unless `*` grants it.
        let none = Rules::new(std::slice::from_ref(&a), true).unwrap();
        assert!(!none.for_identity(None).allows_key(b"a:1") && !none.for_identity(None).grants(Admin::Stats));
        assert!(!Rules::new(&[], true).unwrap().for_identity(None).allows_key(b"x"));
        let open_star = Rule::parse(r#"identity = "*""#).unwrap();
        let granted = Rules::new(&[a.clone(), open_star], true).unwrap();
        assert!(granted.for_identity(None).allows_key(b"b:1"));
        assert!(Rules::new(std::slice::from_ref(&a), false).unwrap_err().contains("--auth-file"));
        assert!(Rules::new(&[a.clone(), a], true).unwrap_err().contains("two access rules"));
        assert!(Rules::new(&[star.clone(), star], true).is_err());
    }
}

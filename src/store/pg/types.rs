//! The shared vocabulary (`crate::vocab`) as PostgreSQL `TEXT` columns:
//! each type is sent and read as its text, and a row whose text does not
//! read back is an error naming the column.

use crate::vocab::{
    ActionKind, Actor, AttemptOutcome, ErrorType, InstanceId, InstanceStatus, RunEnd, StepStatus,
    Timestamp, TokenScope, UnitKeyBuf,
};
use bytes::BytesMut;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

type BoxError = Box<dyn std::error::Error + Sync + Send>;

/// Types sent as a text they can give.
macro_rules! text_column {
    ($t:ty, |$v:ident| $text:expr, |$s:ident| $parse:expr) => {
        impl ToSql for $t {
            fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> Result<IsNull, BoxError> {
                let $v = self;
                <&str as ToSql>::to_sql(&&*$text, ty, out)
            }
            fn accepts(ty: &Type) -> bool {
                <&str as ToSql>::accepts(ty)
            }
            to_sql_checked!();
        }
        impl<'a> FromSql<'a> for $t {
            fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
                let $s = <&str as FromSql>::from_sql(ty, raw)?;
                $parse
            }
            fn accepts(ty: &Type) -> bool {
                <&str as FromSql>::accepts(ty)
            }
        }
    };
}

text_column!(InstanceStatus, |v| v.as_str(), |s| Ok(s.parse()?));
text_column!(StepStatus, |v| v.as_str(), |s| Ok(s.parse()?));
text_column!(AttemptOutcome, |v| v.as_str(), |s| Ok(s.parse()?));
text_column!(RunEnd, |v| v.as_str(), |s| Ok(s.parse()?));
text_column!(ActionKind, |v| v.as_str(), |s| Ok(s.parse()?));
text_column!(TokenScope, |v| v.as_str(), |s| Ok(s.parse()?));
text_column!(Actor, |v| v.to_string(), |s| Ok(Actor::parse(s)));
text_column!(Timestamp, |v| v.text(), |s| Ok(s.parse()?));
text_column!(ErrorType, |v| v.text(), |s| Ok(ErrorType::parse(s)));
text_column!(InstanceId, |v| v.as_str(), |s| Ok(InstanceId::from(s)));
text_column!(UnitKeyBuf, |v| v.as_str(), |s| Ok(UnitKeyBuf::new(s)));

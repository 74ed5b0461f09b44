//! A statement's parameters bound from one tuple, in the order the SQL numbers them.
//!
//! sqlx binds one value per call, so a statement of six parameters read as six lines of
//! `.bind(x)` that said nothing but their order; `bind_all((a, b, c))` says that order
//! once, as `$1`, `$2`, `$3` are written in the SQL above it.

use sqlx::query::{Query, QueryAs, QueryScalar};
use sqlx::{Database, Encode, Type};

use super::backend::Db;

type Arguments<'q> = <Db as Database>::Arguments<'q>;

/// A statement that takes its parameters one value at a time.
pub(in crate::store) trait BindAll<'q>: Sized {
    fn bind_one<T: 'q + Encode<'q, Db> + Type<Db>>(self, value: T) -> Self;

    /// Binds each member of `params` as the next parameter, first to last.
    fn bind_all(self, params: impl Params<'q>) -> Self {
        params.bind_to(self)
    }
}

impl<'q> BindAll<'q> for Query<'q, Db, Arguments<'q>> {
    fn bind_one<T: 'q + Encode<'q, Db> + Type<Db>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, O> BindAll<'q> for QueryAs<'q, Db, O, Arguments<'q>> {
    fn bind_one<T: 'q + Encode<'q, Db> + Type<Db>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, O> BindAll<'q> for QueryScalar<'q, Db, O, Arguments<'q>> {
    fn bind_one<T: 'q + Encode<'q, Db> + Type<Db>>(self, value: T) -> Self {
        self.bind(value)
    }
}

/// A tuple of parameter values.
pub(in crate::store) trait Params<'q> {
    fn bind_to<Statement: BindAll<'q>>(self, statement: Statement) -> Statement;
}

macro_rules! tuple_params {
    ($last:ident) => {};
    ($head:ident $(, $tail:ident)+) => {
        impl<'q, $head: 'q + Encode<'q, Db> + Type<Db>, $($tail: 'q + Encode<'q, Db> + Type<Db>),+>
            Params<'q> for ($head, $($tail,)+)
        {
            #[allow(non_snake_case)]
            fn bind_to<Statement: BindAll<'q>>(self, statement: Statement) -> Statement {
                let ($head, $($tail,)+) = self;
                statement.bind_one($head)$(.bind_one($tail))+
            }
        }
        tuple_params!($($tail),+);
    };
}

// Every arity from 2 to the widest statement's, Postgres' batch writes of arrays.
tuple_params!(A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q, R, S, T, U, V);

/* boxmaker.memoryd.index._rank: a read-only SQLite connection of its own that ranks with bm25 from
 * document frequencies the caller already knows (issue 16; M5a section 6).
 *
 * FTS5's built-in bm25() works out each phrase's idf by walking every row that holds the phrase, once per
 * statement. On a large index a common word makes that walk the largest part of a recall. `boxrank` is the
 * same Okapi BM25 (k1 = 1.2, b = 0.75, column weights on term frequencies, the row's length over all
 * columns against the average, idf = ln((N - n + 0.5) / (n + 0.5)) floored at 1e-6), the same arithmetic in
 * the same order, so its scores equal bm25()'s bit for bit when it is given the true document frequencies:
 *
 *     boxrank(hits, <one weight per column>, <one document frequency per phrase of the MATCH>)
 *
 * A negative frequency leaves its phrase out of the score (a phrase that is in the MATCH only to select
 * rows, such as a repeat of another).
 * Python's sqlite3 module gives no way to add an FTS5 auxiliary function to its connections, so `Ranker`
 * opens its own connection (through SQLite's public C API, on the same library Python's sqlite3 uses) and
 * offers `execute`, enough to run a recall's statements in one read transaction on it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <sqlite3.h>
#include <string.h>

#define STATEMENTS 16

/* Row lengths (tokens over every column) by rowid, as FTS5 keeps them in its docsize table: reading one
 * there is a B-tree lookup per scored row, most of a ranking's time, and a row's length never changes
 * (rows are only appended; the caller calls forget_lengths when rows leave the table). Stored plus one,
 * so 0 is "not known yet". Rowids past LENGTHS_MAX are not kept. */
#define LENGTHS_MAX (1 << 26)

typedef struct {
    PyObject_HEAD sqlite3 *db;
    char *sql[STATEMENTS];
    sqlite3_stmt *stmt[STATEMENTS];
    int next;
    int *lengths;
    sqlite3_int64 capacity;
    int busy; /* a statement is stepping (the GIL let go): another thread may not use or close it */
} Ranker;

/* The row's length: remembered, or read through FTS5 and remembered. */
static int row_length(Ranker *owner, const Fts5ExtensionApi *api, Fts5Context *fts, int *length) {
    sqlite3_int64 rowid = api->xRowid(fts);
    if (rowid > 0 && rowid < owner->capacity && owner->lengths[rowid] > 0) {
        *length = owner->lengths[rowid] - 1;
        return SQLITE_OK;
    }
    int rc = api->xColumnSize(fts, -1, length);
    if (rc != SQLITE_OK || rowid <= 0 || rowid >= LENGTHS_MAX) return rc;
    if (rowid >= owner->capacity) {
        sqlite3_int64 capacity = owner->capacity ? owner->capacity : 4096;
        while (capacity <= rowid) capacity *= 2;
        int *grown = sqlite3_realloc64(owner->lengths, (sqlite3_uint64)capacity * sizeof(int));
        if (grown == NULL) return SQLITE_OK; /* not remembered; the length itself is right */
        memset(&grown[owner->capacity], 0, (size_t)(capacity - owner->capacity) * sizeof(int));
        owner->lengths = grown;
        owner->capacity = capacity;
    }
    owner->lengths[rowid] = *length + 1;
    return SQLITE_OK;
}

typedef struct {
    int phrases;
    int columns;
    double average_length;
    double *idf;
    double *weight;
    double *frequency;
} Scoring;

static void scoring_free(void *p) { sqlite3_free(p); }

static Scoring *scoring_new(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nval,
                            sqlite3_value **values) {
    int columns = api->xColumnCount(fts);
    int phrases = api->xPhraseCount(fts);
    if (nval != columns + phrases) {
        sqlite3_result_error(ctx, "boxrank: give one weight per column and one document frequency per phrase",
                             -1);
        return NULL;
    }
    sqlite3_int64 rows = 0, tokens = 0;
    int rc = api->xRowCount(fts, &rows);
    if (rc == SQLITE_OK) rc = api->xColumnTotalSize(fts, -1, &tokens);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return NULL;
    }
    size_t bytes = sizeof(Scoring) + sizeof(double) * (size_t)(2 * phrases + columns);
    Scoring *s = sqlite3_malloc64(bytes);
    if (s == NULL) {
        sqlite3_result_error_nomem(ctx);
        return NULL;
    }
    memset(s, 0, bytes);
    s->phrases = phrases;
    s->columns = columns;
    s->idf = (double *)&s[1];
    s->frequency = &s->idf[phrases];
    s->weight = &s->frequency[phrases];
    s->average_length = rows > 0 ? (double)tokens / (double)rows : 1.0;
    for (int i = 0; i < columns; i++) s->weight[i] = sqlite3_value_double(values[i]);
    for (int i = 0; i < phrases; i++) {
        sqlite3_int64 hits = sqlite3_value_int64(values[columns + i]);
        double idf = log(((double)rows - (double)hits + 0.5) / ((double)hits + 0.5));
        s->idf[i] = hits < 0 ? 0.0 : idf <= 0.0 ? 1e-6 : idf; /* 0: a phrase not scored */
    }
    rc = api->xSetAuxdata(fts, s, scoring_free);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return NULL;
    }
    return s;
}

static void boxrank(const Fts5ExtensionApi *api, Fts5Context *fts, sqlite3_context *ctx, int nval,
                    sqlite3_value **values) {
    const double k1 = 1.2, b = 0.75;
    Scoring *s = api->xGetAuxdata(fts, 0);
    if (s == NULL && (s = scoring_new(api, fts, ctx, nval, values)) == NULL) return;
    memset(s->frequency, 0, sizeof(double) * (size_t)s->phrases);
    int instances = 0;
    int rc = api->xInstCount(fts, &instances);
    for (int i = 0; rc == SQLITE_OK && i < instances; i++) {
        int phrase, column, offset;
        rc = api->xInst(fts, i, &phrase, &column, &offset);
        if (rc == SQLITE_OK) s->frequency[phrase] += s->weight[column];
    }
    int length = 0;
    if (rc == SQLITE_OK) rc = row_length(api->xUserData(fts), api, fts, &length);
    if (rc != SQLITE_OK) {
        sqlite3_result_error_code(ctx, rc);
        return;
    }
    double score = 0.0, d = (double)length;
    for (int i = 0; i < s->phrases; i++) {
        if (s->idf[i] == 0.0) continue;
        double f = s->frequency[i];
        score += s->idf[i] * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * d / s->average_length)));
    }
    sqlite3_result_double(ctx, -1.0 * score);
}


static PyObject *sqlite_error; /* sqlite3.OperationalError */

static PyObject *fail(Ranker *self, const char *what) {
    PyErr_Format(sqlite_error, "%s: %s", what, self->db ? sqlite3_errmsg(self->db) : "no connection");
    return NULL;
}

static void forget_statements(Ranker *self) {
    for (int i = 0; i < STATEMENTS; i++) {
        sqlite3_finalize(self->stmt[i]);
        PyMem_Free(self->sql[i]);
        self->stmt[i] = NULL;
        self->sql[i] = NULL;
    }
}

static void forget_lengths(Ranker *self) {
    sqlite3_free(self->lengths);
    self->lengths = NULL;
    self->capacity = 0;
}

static void close_db(Ranker *self) {
    forget_statements(self);
    forget_lengths(self);
    if (self->db) {
        sqlite3_close_v2(self->db);
        self->db = NULL;
    }
}

static void ranker_dealloc(Ranker *self) {
    close_db(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int add_boxrank(Ranker *self) {
    sqlite3 *db = self->db;
    fts5_api *fts = NULL;
    sqlite3_stmt *stmt = NULL;
    int rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &stmt, NULL);
    if (rc == SQLITE_OK) rc = sqlite3_bind_pointer(stmt, 1, (void *)&fts, "fts5_api_ptr", NULL);
    if (rc == SQLITE_OK && sqlite3_step(stmt) != SQLITE_ROW) rc = SQLITE_ERROR;
    sqlite3_finalize(stmt);
    if (rc != SQLITE_OK || fts == NULL || fts->iVersion < 2) return SQLITE_ERROR;
    return fts->xCreateFunction(fts, "boxrank", self, boxrank, NULL);
}

static int ranker_init(Ranker *self, PyObject *args, PyObject *kwds) {
    static char *keywords[] = {"path", "cache_kib", "timeout_ms", NULL};
    const char *path;
    int cache_kib = 4096, timeout_ms = 60000;
    /* the path as bytes (os.fsencode): SQLite opens exactly those bytes, UTF-8 or not */
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "y|ii", keywords, &path, &cache_kib, &timeout_ms)) return -1;
    close_db(self);
    int rc;
    Py_BEGIN_ALLOW_THREADS rc = sqlite3_open_v2(path, &self->db, SQLITE_OPEN_READONLY, NULL);
    Py_END_ALLOW_THREADS if (rc != SQLITE_OK) {
        fail(self, "cannot open the index");
        close_db(self);
        return -1;
    }
    sqlite3_busy_timeout(self->db, timeout_ms);
    char pragma[64];
    snprintf(pragma, sizeof pragma, "PRAGMA cache_size=-%d", cache_kib);
    if (sqlite3_exec(self->db, pragma, NULL, NULL, NULL) != SQLITE_OK || add_boxrank(self) != SQLITE_OK) {
        fail(self, "cannot prepare the ranking connection");
        close_db(self);
        return -1;
    }
    return 0;
}

static sqlite3_stmt *statement(Ranker *self, const char *sql) {
    for (int i = 0; i < STATEMENTS; i++)
        if (self->sql[i] && strcmp(self->sql[i], sql) == 0) return self->stmt[i];
    sqlite3_stmt *stmt = NULL;
    if (sqlite3_prepare_v2(self->db, sql, -1, &stmt, NULL) != SQLITE_OK) return NULL;
    int slot = self->next;
    self->next = (slot + 1) % STATEMENTS;
    sqlite3_finalize(self->stmt[slot]);
    PyMem_Free(self->sql[slot]);
    size_t size = strlen(sql) + 1;
    self->sql[slot] = PyMem_Malloc(size);
    if (self->sql[slot] == NULL) {
        sqlite3_finalize(stmt);
        self->stmt[slot] = NULL;
        PyErr_NoMemory();
        return NULL;
    }
    memcpy(self->sql[slot], sql, size);
    self->stmt[slot] = stmt;
    return stmt;
}

static int bind(sqlite3_stmt *stmt, PyObject *params) {
    Py_ssize_t n = PyTuple_GET_SIZE(params);
    if (n != sqlite3_bind_parameter_count(stmt)) {
        PyErr_Format(PyExc_ValueError, "the statement takes %d parameters, %zd given",
                     sqlite3_bind_parameter_count(stmt), n);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *v = PyTuple_GET_ITEM(params, i);
        int rc, at = (int)i + 1;
        if (v == Py_None) {
            rc = sqlite3_bind_null(stmt, at);
        } else if (PyLong_Check(v)) {
            long long x = PyLong_AsLongLong(v);
            if (x == -1 && PyErr_Occurred()) return -1;
            rc = sqlite3_bind_int64(stmt, at, x);
        } else if (PyFloat_Check(v)) {
            rc = sqlite3_bind_double(stmt, at, PyFloat_AS_DOUBLE(v));
        } else if (PyUnicode_Check(v)) {
            Py_ssize_t size;
            const char *text = PyUnicode_AsUTF8AndSize(v, &size);
            if (text == NULL) return -1;
            rc = sqlite3_bind_text64(stmt, at, text, (sqlite3_uint64)size, SQLITE_TRANSIENT, SQLITE_UTF8);
        } else {
            PyErr_Format(PyExc_TypeError, "parameter %d is a %s, not None, int, float or str", at,
                         Py_TYPE(v)->tp_name);
            return -1;
        }
        if (rc != SQLITE_OK) {
            PyErr_Format(sqlite_error, "cannot bind parameter %d", at);
            return -1;
        }
    }
    return 0;
}

static PyObject *column(sqlite3_stmt *stmt, int i) {
    switch (sqlite3_column_type(stmt, i)) {
    case SQLITE_INTEGER:
        return PyLong_FromLongLong(sqlite3_column_int64(stmt, i));
    case SQLITE_FLOAT:
        return PyFloat_FromDouble(sqlite3_column_double(stmt, i));
    case SQLITE_TEXT:
        return PyUnicode_FromStringAndSize((const char *)sqlite3_column_text(stmt, i),
                                           sqlite3_column_bytes(stmt, i));
    case SQLITE_BLOB:
        return PyBytes_FromStringAndSize(sqlite3_column_blob(stmt, i), sqlite3_column_bytes(stmt, i));
    default:
        Py_RETURN_NONE;
    }
}

/* True (with RuntimeError set) while another thread steps a statement on the connection. */
static int in_use(Ranker *self) {
    if (self->busy) PyErr_SetString(PyExc_RuntimeError, "the ranking connection is in use by another thread");
    return self->busy;
}

static PyObject *ranker_execute(Ranker *self, PyObject *args) {
    const char *sql;
    PyObject *params;
    if (!PyArg_ParseTuple(args, "sO!", &sql, &PyTuple_Type, &params)) return NULL;
    if (self->db == NULL) return fail(self, "the ranking connection is closed");
    if (in_use(self)) return NULL;
    sqlite3_stmt *stmt = statement(self, sql);
    if (stmt == NULL) return PyErr_Occurred() ? NULL : fail(self, "cannot prepare a statement");
    PyObject *rows = NULL;
    if (bind(stmt, params) < 0) goto done;
    rows = PyList_New(0);
    if (rows == NULL) goto done;
    int columns = sqlite3_column_count(stmt);
    for (;;) {
        int rc;
        self->busy = 1;
        Py_BEGIN_ALLOW_THREADS rc = sqlite3_step(stmt);
        Py_END_ALLOW_THREADS self->busy = 0;
        if (rc == SQLITE_DONE) break;
        if (rc != SQLITE_ROW) {
            Py_CLEAR(rows);
            fail(self, "a statement failed");
            goto done;
        }
        PyObject *row = PyTuple_New(columns);
        if (row == NULL || PyList_Append(rows, row) < 0) {
            Py_XDECREF(row);
            Py_CLEAR(rows);
            goto done;
        }
        Py_DECREF(row);
        for (int i = 0; i < columns; i++) {
            PyObject *value = column(stmt, i);
            if (value == NULL) {
                Py_CLEAR(rows);
                goto done;
            }
            PyTuple_SET_ITEM(row, i, value);
        }
    }
done:
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    return rows;
}

static PyObject *ranker_close(Ranker *self, PyObject *unused) {
    if (in_use(self)) return NULL;
    close_db(self);
    Py_RETURN_NONE;
}

static PyObject *ranker_forget_lengths(Ranker *self, PyObject *unused) {
    if (in_use(self)) return NULL;
    forget_lengths(self);
    Py_RETURN_NONE;
}

static PyObject *ranker_remembered(Ranker *self, PyObject *unused) {
    sqlite3_int64 known = 0;
    for (sqlite3_int64 i = 0; i < self->capacity; i++) known += self->lengths[i] > 0;
    return PyLong_FromLongLong(known);
}

static PyMethodDef ranker_methods[] = {
    {"forget_lengths", (PyCFunction)ranker_forget_lengths, METH_NOARGS,
     "Forget the remembered row lengths (rows left the table)."},
    {"remembered", (PyCFunction)ranker_remembered, METH_NOARGS, "How many row lengths are remembered."},
    {"execute", (PyCFunction)ranker_execute, METH_VARARGS,
     "execute(sql, params) -> list of row tuples. Raises sqlite3.OperationalError."},
    {"close", (PyCFunction)ranker_close, METH_NOARGS, "Close the connection (idempotent)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject RankerType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "boxmaker.memoryd.index._rank.Ranker",
    .tp_basicsize = sizeof(Ranker),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Ranker(path: bytes, cache_kib=4096, timeout_ms=60000): a read-only connection with boxrank().",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ranker_init,
    .tp_dealloc = (destructor)ranker_dealloc,
    .tp_methods = ranker_methods,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rank", "bm25 from known document frequencies (boxrank) on an own connection.",
    -1, NULL,
};

PyMODINIT_FUNC PyInit__rank(void) {
    PyObject *sqlite = PyImport_ImportModule("sqlite3");
    if (sqlite == NULL) return NULL;
    sqlite_error = PyObject_GetAttrString(sqlite, "OperationalError");
    Py_DECREF(sqlite);
    if (sqlite_error == NULL || PyType_Ready(&RankerType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    Py_INCREF(&RankerType);
    if (PyModule_AddObject(m, "Ranker", (PyObject *)&RankerType) < 0) {
        Py_DECREF(&RankerType);
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddStringConstant(m, "SQLITE_VERSION", sqlite3_libversion());
    /* where this module's SQLite lives: the caller checks it is the library Python's sqlite3 uses (two
     * copies of SQLite in one process do not see each other's POSIX locks on the same file) */
    PyModule_AddObject(m, "LIBRARY_ADDRESS", PyLong_FromVoidPtr((void *)sqlite3_libversion));
    return m;
}

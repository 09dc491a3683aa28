/* Python's side of the shim's messages: a Python object's text, and a
 * pending Python error as one warning, through the logger (shim_log.c). */
#include "dump_py.h"

#include <string.h>

/* Text of a Python object into buf (UTF-8, truncated); never raises. */
void msp_obj_text(PyObject *o, int use_repr, char *buf, size_t n)
{
    buf[0] = '\0';
    PyObject *s = use_repr ? PyObject_Repr(o) : PyObject_Str(o);
    PyObject *b = s ? PyUnicode_AsUTF8String(s) : NULL;
    if (b) {
        const char *c = PyBytes_AsString(b);
        if (c) {
            size_t len = strlen(c);
            if (len >= n && n > 4) {
                memcpy(buf, c, n - 4);
                memcpy(buf + n - 4, "...", 4);
            } else {
                size_t at = 0;
                msp_str_add(buf, n, &at, c);
            }
        }
    }
    Py_XDECREF(b);
    Py_XDECREF(s);
    if (PyErr_Occurred())
        PyErr_Clear();
}

void msp_py_warn_error(const char *kind, const char *what)
{
    PyObject *type, *val, *tb;
    char text[256] = "";
    PyErr_Fetch(&type, &val, &tb);
    if (val)
        msp_obj_text(val, 0, text, sizeof text);
    else if (type)
        msp_obj_text(type, 0, text, sizeof text);
    Py_XDECREF(type);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    msp_shim_warn_once(kind, "%s: %s", what, text);
}

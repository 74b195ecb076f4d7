/* views.h: the faces' views of the daemon (views.c): made with the manager. */
#pragma once

#include "manager.h"

int views_new(Views **ret);
Views *views_free(Views *v);

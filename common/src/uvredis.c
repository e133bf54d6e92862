/* SPDX-License-Identifier: MIT */
/* placeholder, being written */
